"""SVG files of a test plugin, read with importlib.resources
(tests/unit/services/test_catalog_isolation.py)."""
