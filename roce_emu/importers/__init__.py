"""Other tools' files, read into roce-emu scenarios.

- ``astra_sim``: ASTRA-sim network YAML (a multi_dim fabric) and system JSON (collective
  algorithms and chunks).
- ``chakra`` and ``chakra_schema``: Chakra execution traces (MLCommons), read into plain
  node records; ``roce_emu/workload/chakra.py`` makes them the task DAG.
- ``ns3``: the HPCC ns-3 simulator's configuration, topology and flow files.

They read other tools' files into scenario documents and sections (the configuration reads a
topology ``file`` through them); writing the scenario file is results/scenario_file.py.

docs/importers.md documents each mapping.
"""
