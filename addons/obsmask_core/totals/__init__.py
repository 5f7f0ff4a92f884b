"""What obsmask did, added up: per conversation and per process, from the
facts each flow carries (its metadata), and served as JSON and as
Prometheus metrics. Reads only those facts, so it imports nothing of the
two features."""
