"""`python -m planner_arm` runs the command line."""

from planner_arm.cli import main

main()
