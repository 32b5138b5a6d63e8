# expect: FORMAT_ERROR
import torch.nn as nn


class Model2(nn.Module):
    pass
