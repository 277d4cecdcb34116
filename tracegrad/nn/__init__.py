"""`tracegrad.nn`: modules, parameters, layers and losses with PyTorch's names and semantics.

`functional` holds the stateless functions, `init` the initializers.
"""
from . import functional, init  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from .container import ModuleList, Sequential  # noqa: F401
from .layers import (GELU, Conv2d, Dropout, Embedding, Flatten, Identity,  # noqa: F401
                     LeakyReLU, Linear, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh)
from .loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from .module import Module  # noqa: F401
from .parameter import Parameter  # noqa: F401
from ._activation import SiLU, Softplus  # noqa: F401
from ._attention import MultiheadAttention  # noqa: F401
from ._containers_extra import ModuleDict, ParameterDict, ParameterList  # noqa: F401
from ._loss_extra import (BCELoss, BCEWithLogitsLoss, HuberLoss, L1Loss,  # noqa: F401
                          SmoothL1Loss)
from ._norm import LayerNorm  # noqa: F401
from ._modules_training_more import GroupNorm, KLDivLoss  # noqa: F401
from ._pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from . import utils  # noqa: F401,E402
from ._rnn import GRU, LSTM, RNN, RNNBase  # noqa: F401,E402
from ._rnn_cells import GRUCell, LSTMCell, RNNCell  # noqa: F401,E402
from ._layers_1d import AvgPool1d, Conv1d, MaxPool1d, Upsample  # noqa: F401,E402
from ._transformer import TransformerEncoder, TransformerEncoderLayer  # noqa: F401,E402
from ._conv_transpose import ConvTranspose2d  # noqa: F401,E402
from ._layers_reshape import Unflatten  # noqa: F401,E402
from ._activation_more import (CELU, ELU, GLU, SELU, Hardshrink, Hardsigmoid,  # noqa: F401,E402
                               Hardswish, Hardtanh, LogSigmoid, Mish, PReLU, ReLU6, Softmin,
                               Softshrink, Softsign, Tanhshrink, Threshold)
from ._modules_gaps2 import (AdaptiveAvgPool1d, Bilinear, CosineEmbeddingLoss,  # noqa: F401,E402
                             CosineSimilarity, GaussianNLLLoss, HingeEmbeddingLoss,
                             MarginRankingLoss, PairwiseDistance, PixelShuffle, PixelUnshuffle,
                             PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss)
from ._conv_transpose_1d import ConvTranspose1d  # noqa: F401,E402
from ._embedding_bag import EmbeddingBag  # noqa: F401,E402
from ._fold import Fold, Unfold  # noqa: F401,E402
from ._buffer import Buffer  # noqa: F401,E402
from ._norm_more import (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,  # noqa: F401,E402
                         RMSNorm)
from ._dropout_nd import Dropout1d, Dropout2d, Dropout3d  # noqa: F401,E402
from ._transformer_decoder import (Transformer, TransformerDecoder,  # noqa: F401,E402
                                   TransformerDecoderLayer)
from ._padding_modules import (CircularPad1d, CircularPad2d, CircularPad3d,  # noqa: F401,E402
                               ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                               ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                               ReplicationPad2d, ReplicationPad3d, Softmax2d,
                               UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d,
                               ZeroPad3d)
from ._lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,  # noqa: F401,E402
                    LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,
                    LazyConvTranspose2d, LazyConvTranspose3d,
                    LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear)
from .parameter import UninitializedBuffer, UninitializedParameter  # noqa: F401,E402
from ._modules_layers3 import (AdaptiveMaxPool1d, AdaptiveMaxPool2d,  # noqa: F401,E402
                               AdaptiveMaxPool3d, LocalResponseNorm, MaxUnpool1d, MaxUnpool2d,
                               MaxUnpool3d, MultiLabelMarginLoss,
                               MultiLabelSoftMarginLoss, MultiMarginLoss,
                               TripletMarginWithDistanceLoss)
from ._functional_pool_shuffle import ChannelShuffle, LPPool1d, LPPool2d  # noqa: F401,E402
from ._random_layers import AlphaDropout, FeatureAlphaDropout, RReLU  # noqa: F401,E402
from ._layers_3d import (AdaptiveAvgPool3d, AvgPool3d, Conv3d,  # noqa: F401,E402
                         ConvTranspose3d, MaxPool3d)
from ._functional_ctc import CTCLoss  # noqa: F401,E402
from . import modules  # noqa: F401,E402
