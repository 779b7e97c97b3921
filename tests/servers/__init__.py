"""Real inference servers in the loop: build llama.cpp's llama-server, write a tiny model, run both."""
