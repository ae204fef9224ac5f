def verify(sg):
    return "x" * 5_000_000
