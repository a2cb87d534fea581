from .cli import entry

if __name__ == "__main__":  # also imported, as __mp_main__, by the spawned log-parsing workers
    entry()
