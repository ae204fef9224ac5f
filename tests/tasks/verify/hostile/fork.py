import os


def verify(sg):
    pid = os.fork()
    if pid == 0:
        open("MARKER", "w").write("child")
        while True:
            pass
    return pid
