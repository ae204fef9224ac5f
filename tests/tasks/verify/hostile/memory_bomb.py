def verify(sg):
    blocks = []
    while True:
        blocks.append([0] * 10_000_000)
