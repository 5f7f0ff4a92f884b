"""bench_refetch: re-fetches and natural repeats on the shared sessions."""
