"""Files an exported library bundle ships as they are (``agent.bundle`` copies or renders them):
the standalone Python loader ``tuneforge_loader.py`` (torch, the CUDA driver bindings and the
standard library only: it never imports tuneforge) and the C++ header template."""
