from determined import pytorch

class MNistTrial(pytorch.PyTorchTrial):
    pass
