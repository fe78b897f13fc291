"""The device manager: hints from the devices a container or pod already holds."""
