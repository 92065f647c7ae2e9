"""The PR evidence's commands, one module each (listed in forktool.commands)."""
