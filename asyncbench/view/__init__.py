"""`asyncbench view`: every run of a cache in the browser (a local web server over the
DuckDB store, read between a running evaluation's writes), live while runs go."""
