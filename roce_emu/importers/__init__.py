"""Other tools' files, read into roce-emu scenarios.

- ``astra_sim``: ASTRA-sim network YAML (a multi_dim fabric) and system JSON (collective
  algorithms and chunks).
- ``scenario_file``: writing an imported scenario, with where it came from and what was left
  out, atomically.

docs/importers.md documents each mapping.
"""
