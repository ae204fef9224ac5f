def verify(sg):
    for cls in ().__class__.__mro__[1].__subclasses__():
        if cls.__name__ == "_wrap_close":
            cls.__init__.__globals__["system"]("touch MARKER")
    return "escaped"
