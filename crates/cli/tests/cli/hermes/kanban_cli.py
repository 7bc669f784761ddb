"""Runs hermes-agent's `hermes kanban ARGS...` and exits with the verb's own return code.

`hermes kanban` itself always exits 0 (hermes-agent's `main` drops the code its kanban
command returns), so this builds the same parser and calls the same command function,
keeping the code its source documents. Run in the test virtualenv."""

import argparse
import sys

from hermes_cli import kanban

parser = argparse.ArgumentParser(prog="hermes")
kanban.build_parser(parser.add_subparsers(dest="command"))
args = parser.parse_args(["kanban", *sys.argv[1:]])
sys.stdout.flush()
sys.exit(kanban.kanban_command(args))
