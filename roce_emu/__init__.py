"""roce-emu: a packet-level RoCE congestion-control network emulator for distributed training."""

__version__ = "0.1.0"
