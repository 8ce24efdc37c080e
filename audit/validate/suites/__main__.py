"""`python -m audit.validate.suites <expectations dir>` (see audit.validate.suites.main)."""
import sys

from audit.validate.suites import main

sys.exit(main())
