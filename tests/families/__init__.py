"""Kernel families defined only by the tests: they prove a family needs nothing outside its own
package (registered at run time, or through the ``tuneforge.families`` entry-point group)."""
