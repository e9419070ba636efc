"""`python -m tools.preflight --stack S [--json]` (make preflight STACK=S); see run.py."""
import sys

from .run import main

sys.exit(main())
