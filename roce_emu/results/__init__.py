"""What a run reports: the flow table, the summary and the traces (``tables``), the task,
collective and timeline tables and the iteration breakdown (``iteration``), the files they are
written to (``output``) and where they may be written (``destination``), throughput and
fairness (``metrics``), the standard figures (``figures``), where a run came from
(``provenance``) and the line ``roce-emu run`` prints at the end (``console``)."""
