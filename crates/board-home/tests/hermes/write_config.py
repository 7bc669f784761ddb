"""Writes the config.yaml that hermes-agent itself writes, every default spelled out,
into the directory given (as HERMES_HOME). Run in the test virtualenv
(`cargo xtask venv` installs the pinned hermes-agent)."""

import copy
import os
import sys

os.environ["HERMES_HOME"] = sys.argv[1]

from hermes_cli.config import DEFAULT_CONFIG, get_config_path, save_config  # noqa: E402

save_config(copy.deepcopy(DEFAULT_CONFIG), strip_defaults=False)
print(get_config_path())
