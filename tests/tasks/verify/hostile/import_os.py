import os


def verify(sg):
    return os.system("touch MARKER")
