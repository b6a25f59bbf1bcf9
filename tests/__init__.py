"""tensortune's test suites, one folder (package) per layer so module names may repeat."""
