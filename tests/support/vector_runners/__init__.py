"""One runner per kubelet vector file: turns a case into podpin calls and checks the expected outcome."""
