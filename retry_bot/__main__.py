import sys
from retry_bot.cli import main

sys.exit(main())
