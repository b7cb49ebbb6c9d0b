import sys
from pathlib import Path

# The project's package (review/) is imported from the project's root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
