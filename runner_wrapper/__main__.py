import sys
from runner_wrapper.cli import main

sys.exit(main())
