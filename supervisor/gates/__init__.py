"""The checks a candidate must pass, in one place: which commands run, the tests pinned from the
base, running them with no network, counting results, reusing a pass by tree, the base oracle.
"""
