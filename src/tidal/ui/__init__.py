"""``tidal ui``: a read-only web dashboard of runs, live or finished (graph, series, decisions)."""
