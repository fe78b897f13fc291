"""podpin tests."""
