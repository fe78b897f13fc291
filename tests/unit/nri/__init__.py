"""Unit tests of ``agent.nri``: framing, ttrpc, the socket, values, the plugin against a Go-framed runtime."""
