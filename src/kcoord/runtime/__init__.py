"""The shell that runs the pure coordinator: loading partitions, appends and their completion."""
