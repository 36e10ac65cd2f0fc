"""Configuration and plug-ins: typed recipe sections and their strict loader, the
registries that variants join, plug-in import, migrations of what earlier versions
wrote, the environment and the device."""
