def execute_command(scene_graph):
    n = 0
    while True:
        n += 1
