import resource


def verify(sg):
    resource.setrlimit(resource.RLIMIT_FSIZE, (10**9, 10**9))
    open("MARKER", "w").write("x" * 100)
    return "raised"
