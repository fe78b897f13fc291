"""Tests of what ships: the Helm chart, the plain manifests generated from it, the Dockerfile and the image."""
