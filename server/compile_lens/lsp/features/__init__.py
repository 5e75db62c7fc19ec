"""Language features registered on the server, one module each."""
