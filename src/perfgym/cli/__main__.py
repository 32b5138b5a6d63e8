"""python -m perfgym.cli"""
from . import main

main()
