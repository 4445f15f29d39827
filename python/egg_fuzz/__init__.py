"""egg's differential fuzzer: random PyTorch programs compiled by the expert backend and checked against PyTorch."""
