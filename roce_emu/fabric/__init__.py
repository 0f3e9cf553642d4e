"""The fabric a scenario describes: its graph (``topology``), the switches' routes (``routing``:
ECMP next hops and dimension order), network faults and the route epochs they need
(``faults``), the port and node records the engine holds (``records``), and the summary
``roce-emu topo`` prints and draws (``summary``)."""
