def verify(sg):
    with open("MARKER", "w") as handle:
        handle.write("pwned")
    return "written"
