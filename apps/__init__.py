"""L3P planning service: one installed package. Its subpackages are the folders of the checkout
(core, protos, sim, training, serving, clients); this folder holds the `l3p` command and the apps."""
