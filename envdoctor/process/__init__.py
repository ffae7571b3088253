"""How envdoctor runs other processes and ends its own: the Host (the one door to the outside world), the early children started before click, the target interpreter, signals and exit."""
