"""Errors a user can fix: each renders as one line naming the file, the key and what is allowed."""


class ScenarioError(Exception):
    """Bad input: the CLI prints ``str(err)`` as one line and exits with code 2."""

    def __init__(self, source: str, key: str, message: str):
        # one line whatever the input echoed in it (a value or key may hold a newline)
        source, key, message = (str(part).replace("\r", "\\r").replace("\n", "\\n") for part in (source, key, message))
        self.source = source
        self.key = key
        self.message = message
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")


class OutputError(Exception):
    """Finished results could not be written where asked (a full disk, a folder removed meanwhile):
    the CLI prints ``str(err)`` as one line, naming the path and where the results were kept
    instead, and exits with code 1."""


class SimulationError(Exception):
    """The simulation cannot go on (PFC deadlock, stall): exit code 1 with a one-line report."""


#: A pydantic validator's message that starts with AT and a dotted key is reported at that
#: key, below the model that raised it ("@params.g 2 is not allowed ..." on network.cc).
AT = "@"
