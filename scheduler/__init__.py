"""The periodic table by app_env and the process that sends it (Periodiq)."""
