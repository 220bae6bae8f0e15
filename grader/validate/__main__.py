import sys

from grader.validate.cli import main

sys.exit(main())
