"""The subcommands of the ``halfway`` command line, in the order ``halfway --help`` lists them."""

from halfway.commands.base import Command
from halfway.commands.bench import COMMAND as BENCH
from halfway.commands.demo import COMMAND as DEMO
from halfway.commands.devices import COMMAND as DEVICES
from halfway.commands.diff import COMMAND as DIFF
from halfway.commands.graph import COMMAND as GRAPH
from halfway.commands.inspect import COMMAND as INSPECT
from halfway.commands.registry import OPS, PASSES
from halfway.commands.run import COMMAND as RUN
from halfway.commands.transpile import COMMAND as TRANSPILE

__all__ = ["COMMANDS", "Command"]

COMMANDS: tuple[Command, ...] = (DEMO, INSPECT, TRANSPILE, RUN, BENCH, DIFF, GRAPH, DEVICES, PASSES, OPS)
